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
 */
public class CountingLocalFileSystem extends LocalFileSystem {

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
