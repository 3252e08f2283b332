package org.commitlab.conformance;

import org.apache.hadoop.fs.FSDataInputStream;
import org.apache.hadoop.fs.FSDataOutputStream;
import org.apache.hadoop.fs.FileStatus;
import org.apache.hadoop.fs.LocalFileSystem;
import org.apache.hadoop.fs.LocatedFileStatus;
import org.apache.hadoop.fs.RemoteIterator;
import org.apache.hadoop.fs.Path;
import org.apache.hadoop.fs.PathFilter;
import org.apache.hadoop.fs.permission.FsPermission;
import org.apache.hadoop.util.Progressable;

import java.io.FileNotFoundException;
import java.io.IOException;

/**
 * Hadoop's checksummed local file system (the default {@code file://} implementation Hudi gets)
 * with every public call counted in {@link FsCallLog}. Only the outermost call of a thread is
 * counted: Hadoop's own {@code exists -> getFileStatus} or {@code create -> mkdirs} nesting is one
 * logical call, as Hudi made it.
 *
 * <p>Its raw file system sets a file's permission with java.nio instead of a {@code chmod} child
 * process: Hadoop 3.3's {@code RawLocalFileSystem.setPermission} runs
 * {@code Shell.execCommand(chmod)} when libhadoop's {@code NativeIO} is not loaded (it is not
 * here), once for every file and directory it creates (a data file and its {@code .crc}, each
 * marker, each timeline file), from inside Hudi's write tasks. That fork is this machine's missing
 * native library, not Hudi's writer: on HDFS the same call is one name-node RPC, on S3A nothing.
 */
public class CountingLocalFileSystem extends LocalFileSystem {

  /** Hadoop's raw local file system with {@code setPermission} through java.nio (no child process). */
  static final class NioPermissionsRawFileSystem extends org.apache.hadoop.fs.RawLocalFileSystem {
    @Override
    public void setPermission(Path p, FsPermission permission) throws IOException {
      java.io.File f = pathToFile(p);
      // the nine rwx bits, owner first, as chmod takes them (Hadoop's sticky bit has no java.nio form)
      java.nio.file.attribute.PosixFilePermission[] bits = java.nio.file.attribute.PosixFilePermission.values();
      java.util.Set<java.nio.file.attribute.PosixFilePermission> perms =
          java.util.EnumSet.noneOf(java.nio.file.attribute.PosixFilePermission.class);
      int mode = permission.toShort();
      for (int i = 0; i < 9; i++) {
        if ((mode & (1 << (8 - i))) != 0) {
          perms.add(bits[i]);
        }
      }
      try {
        java.nio.file.Files.setPosixFilePermissions(f.toPath(), perms);
      } catch (java.nio.file.NoSuchFileException e) {
        throw new FileNotFoundException("File " + p + " does not exist");
      }
    }
  }

  public CountingLocalFileSystem() {
    super(new NioPermissionsRawFileSystem());
  }

  private static final ThreadLocal<int[]> DEPTH = ThreadLocal.withInitial(() -> new int[1]);

  private interface Call<T> {
    T run() throws IOException;
  }

  private static <T> T counted(String op, Path path, Path target, Call<T> call) throws IOException {
    int[] depth = DEPTH.get();
    if (depth[0] == 0) {
      FsCallLog.record(op, path, target);
    }
    depth[0]++;
    try {
      return call.run();
    } finally {
      depth[0]--;
    }
  }

  @Override
  public FSDataOutputStream create(Path f, FsPermission permission, boolean overwrite, int bufferSize,
      short replication, long blockSize, Progressable progress) throws IOException {
    return counted("create", f, null,
        () -> super.create(f, permission, overwrite, bufferSize, replication, blockSize, progress));
  }

  @Override
  public FSDataOutputStream createNonRecursive(Path f, FsPermission permission,
      java.util.EnumSet<org.apache.hadoop.fs.CreateFlag> flags, int bufferSize, short replication,
      long blockSize, Progressable progress) throws IOException {
    return counted("create", f, null,
        () -> super.createNonRecursive(f, permission, flags, bufferSize, replication, blockSize, progress));
  }

  @Override
  public FSDataOutputStream append(Path f, int bufferSize, Progressable progress) throws IOException {
    return counted("append", f, null, () -> super.append(f, bufferSize, progress));
  }

  @Override
  public FSDataInputStream open(Path f, int bufferSize) throws IOException {
    return counted("open", f, null, () -> super.open(f, bufferSize));
  }

  @Override
  public FileStatus[] listStatus(Path f) throws IOException {
    return counted("list", f, null, () -> super.listStatus(f));
  }

  @Override
  public FileStatus[] listStatus(Path f, PathFilter filter) throws FileNotFoundException, IOException {
    return counted("list", f, null, () -> super.listStatus(f, filter));
  }

  @Override
  public FileStatus[] globStatus(Path pattern) throws IOException {
    return counted("list", pattern, null, () -> super.globStatus(pattern));
  }

  @Override
  public FileStatus[] globStatus(Path pattern, PathFilter filter) throws IOException {
    return counted("list", pattern, null, () -> super.globStatus(pattern, filter));
  }

  @Override
  public FileStatus getFileStatus(Path f) throws IOException {
    return counted("status", f, null, () -> super.getFileStatus(f));
  }

  @Override
  public boolean exists(Path f) throws IOException {
    return counted("status", f, null, () -> super.exists(f));
  }

  @Override
  @SuppressWarnings("deprecation")
  public boolean isFile(Path f) throws IOException {
    return counted("status", f, null, () -> super.isFile(f));
  }

  @Override
  @SuppressWarnings("deprecation")
  public boolean isDirectory(Path f) throws IOException {
    return counted("status", f, null, () -> super.isDirectory(f));
  }

  @Override
  public boolean rename(Path src, Path dst) throws IOException {
    return counted("rename", src, dst, () -> super.rename(src, dst));
  }

  @Override
  public boolean delete(Path f, boolean recursive) throws IOException {
    return counted("delete", f, null, () -> super.delete(f, recursive));
  }

  @Override
  public boolean mkdirs(Path f, FsPermission permission) throws IOException {
    return counted("mkdirs", f, null, () -> super.mkdirs(f, permission));
  }

  // Hadoop 3's FilterFileSystem hands the one-argument mkdirs and the iterator listings straight
  // to the raw file system, past the two-argument forms above: count them here.
  @Override
  public boolean mkdirs(Path f) throws IOException {
    return counted("mkdirs", f, null, () -> super.mkdirs(f));
  }

  @Override
  public RemoteIterator<LocatedFileStatus> listLocatedStatus(Path f) throws IOException {
    return counted("list", f, null, () -> super.listLocatedStatus(f));
  }

  @Override
  public RemoteIterator<FileStatus> listStatusIterator(Path f) throws IOException {
    return counted("list", f, null, () -> super.listStatusIterator(f));
  }
}
