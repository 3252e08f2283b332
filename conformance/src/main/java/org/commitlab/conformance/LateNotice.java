package org.commitlab.conformance;

import org.apache.flink.configuration.Configuration;
import org.apache.flink.runtime.jobgraph.OperatorID;
import org.apache.flink.runtime.operators.coordination.OperatorCoordinator;
import org.apache.hudi.sink.common.AbstractWriteOperator;
import org.apache.hudi.sink.common.WriteOperatorFactory;

import java.io.Serializable;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Proxy;
import java.util.LinkedHashSet;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.TimeUnit;

/**
 * The lab's late completion notice ({@code notify_delay_s}) on the real job: Hudi's own write
 * operator factory, whose coordinator receives {@code notifyCheckpointComplete(k)} the given
 * milliseconds after Flink's job master sent it (the other calls unchanged, on Flink's thread).
 * The coordinator is Hudi's StreamWriteOperatorCoordinator behind a dynamic proxy, so one class
 * serves every Flink release's OperatorCoordinator interface.
 */
final class LateNotice {

  private LateNotice() {}

  /** Hudi's factory for {@code operator}, its coordinator's notices of the checkpoints in {@code delaysMs} late. */
  static <I> WriteOperatorFactory<I> factory(Configuration conf, AbstractWriteOperator<I> operator,
      Map<Long, Long> delaysMs) {
    return new Factory<>(conf, operator, delaysMs);
  }

  private static final class Factory<I> extends WriteOperatorFactory<I> {
    private static final long serialVersionUID = 1L;
    private final Map<Long, Long> delaysMs;

    Factory(Configuration conf, AbstractWriteOperator<I> operator, Map<Long, Long> delaysMs) {
      super(conf, operator);
      this.delaysMs = delaysMs;
    }

    @Override
    public OperatorCoordinator.Provider getCoordinatorProvider(String operatorName, OperatorID operatorID) {
      OperatorCoordinator.Provider hudi = super.getCoordinatorProvider(operatorName, operatorID);
      return delaysMs.isEmpty() ? hudi : new Provider(hudi, delaysMs);
    }
  }

  private static final class Provider implements OperatorCoordinator.Provider, Serializable {
    private static final long serialVersionUID = 1L;
    private final OperatorCoordinator.Provider hudi;
    private final Map<Long, Long> delaysMs;

    Provider(OperatorCoordinator.Provider hudi, Map<Long, Long> delaysMs) {
      this.hudi = hudi;
      this.delaysMs = delaysMs;
    }

    @Override
    public OperatorID getOperatorId() {
      return hudi.getOperatorId();
    }

    @Override
    public OperatorCoordinator create(OperatorCoordinator.Context context) throws Exception {
      OperatorCoordinator inner = hudi.create(context);
      Set<Class<?>> interfaces = new LinkedHashSet<>();
      for (Class<?> c = inner.getClass(); c != null; c = c.getSuperclass()) {
        interfaces.addAll(Set.of(c.getInterfaces()));
      }
      ScheduledExecutorService timer = Executors.newSingleThreadScheduledExecutor(r -> {
        Thread t = new Thread(r, "late-checkpoint-notice");
        t.setDaemon(true);
        return t;
      });
      return (OperatorCoordinator) Proxy.newProxyInstance(inner.getClass().getClassLoader(),
          interfaces.toArray(new Class<?>[0]), (proxy, method, args) -> {
            if (method.getName().equals("notifyCheckpointComplete") && args != null
                && delaysMs.containsKey((Long) args[0])) {
              long id = (Long) args[0];
              RunState.LATE_NOTICES.add("checkpoint " + id + " notified " + delaysMs.get(id) + " ms late");
              timer.schedule(() -> inner.notifyCheckpointComplete(id), delaysMs.get(id), TimeUnit.MILLISECONDS);
              return null;
            }
            try {
              return method.invoke(inner, args);
            } catch (InvocationTargetException e) {
              throw e.getCause();
            }
          });
    }
  }
}
