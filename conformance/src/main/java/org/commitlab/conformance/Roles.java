package org.commitlab.conformance;

import java.util.List;
import java.util.Locale;
import java.util.stream.Collectors;

/**
 * Which Hudi role made a file-system call, from the calling thread's stack: the innermost frame of
 * a Hudi class that belongs to one role decides. Hudi's checkpoint-metadata helper (CkpMetadata) and
 * its executor utilities are skipped, so they take the role of whoever called them. Hudi's local
 * engine context runs parallel work (marker deletion, file listing) on the common fork-join pool,
 * whose threads carry no caller frames: such a call is marked {@link #PARALLEL} and takes, at the
 * end, the role of the nearest call (by sequence) made through the engine context on a thread with a
 * role (see {@link FsCallLog#resolvedCalls()}). Thread names (Flink task threads carry the operator
 * names) decide when nothing else does.
 */
final class Roles {

  private static final StackWalker WALKER = StackWalker.getInstance();
  private static final String ENGINE_CONTEXT = "org.apache.hudi.common.engine.HoodieLocalEngineContext";

  /** Marks a fork-join call whose role is resolved after the run. */
  static final String PARALLEL = "?parallel";

  private Roles() {}

  /** The role, and whether the call went through Hudi's local engine context. */
  record Attribution(String role, boolean parallel) {}

  static Attribution of(Thread thread) {
    List<String> classes = WALKER.walk(frames -> frames
        .map(StackWalker.StackFrame::getClassName)
        .collect(Collectors.toList()));
    String role = null;
    for (String cn : classes) {
      role = roleOfClass(cn);
      if (role != null) {
        break;
      }
    }
    boolean parallel = classes.contains(ENGINE_CONTEXT)
        || classes.contains("org.apache.hudi.common.function.FunctionWrapper");
    if (role != null) {
      return new Attribution(role, parallel);
    }
    if (parallel && thread.getName().startsWith("ForkJoinPool")) {
      return new Attribution(PARALLEL, true);
    }
    return new Attribution(roleOfThread(thread.getName()), parallel);
  }

  /**
   * The Hudi method that made the call: the innermost frame of a Hudi class that is not one of its
   * file-system wrappers or helpers, as {@code SimpleClass.method}; "?" when no Hudi frame is on the stack.
   */
  static String caller() {
    return WALKER.walk(frames -> frames
        .filter(f -> isCaller(f.getClassName()))
        .findFirst()
        .map(f -> f.getClassName().substring(f.getClassName().lastIndexOf('.') + 1) + "." + f.getMethodName())
        .orElse("?"));
  }

  private static boolean isCaller(String cn) {
    return cn.startsWith("org.apache.hudi.")
        && !cn.startsWith("org.apache.hudi.common.fs.HoodieWrapperFileSystem")
        && !cn.startsWith("org.apache.hudi.common.fs.FSUtils")
        && !cn.startsWith("org.apache.hudi.hadoop.fs.")
        && !cn.startsWith("org.apache.hudi.storage.")
        && !cn.startsWith("org.apache.hudi.common.util.FileIOUtils");
  }

  private static String roleOfClass(String cn) {
    if (!cn.startsWith("org.apache.hudi.")) {
      return null;
    }
    if (cn.startsWith("org.apache.hudi.timeline.service.")) {
      return "timeline_server";
    }
    String simple = cn.substring(cn.lastIndexOf('.') + 1);
    if (simple.contains("Coordinator")) {
      return "coordinator";
    }
    if (cn.startsWith("org.apache.hudi.sink.compact.") || cn.startsWith("org.apache.hudi.async.AsyncCompactService")) {
      return "compaction";
    }
    if (cn.startsWith("org.apache.hudi.sink.CleanFunction") || cn.startsWith("org.apache.hudi.async.AsyncCleanerService")) {
      return "clean";
    }
    if (cn.startsWith("org.apache.hudi.sink.meta.") || cn.startsWith("org.apache.hudi.sink.utils.")) {
      return null;
    }
    if (cn.startsWith("org.apache.hudi.sink.clustering.") || cn.startsWith("org.apache.hudi.async.")) {
      return "other";
    }
    if (cn.startsWith("org.apache.hudi.sink.")) {
      return "write_task";
    }
    return null;
  }

  private static String roleOfThread(String name) {
    String n = name.toLowerCase(Locale.ROOT);
    if (n.contains("bucket_write") || n.contains("stream_write")) {
      return "write_task";
    }
    if (n.contains("compact")) {
      return "compaction";
    }
    if (n.contains("clean")) {
      return "clean";
    }
    if (n.contains("javalin") || n.startsWith("qtp")) {
      return "timeline_server";
    }
    return "other";
  }
}
