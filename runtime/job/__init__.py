"""One job, on any host: its configuration prepared once (:mod:`runtime.job.prepare`), its kinds
of role (:mod:`runtime.job.roles`), the launch, supervision and failover (:mod:`runtime.job.driver`,
:mod:`runtime.job.failover`) and its result record (:mod:`runtime.job.record`). Imports
runtime.writer, runtime.lab and below; the hosts (actors, runtime.sim) import it.
"""
