"""Fault injection (the injector, the fault points a host attaches to a role's env) and the named
scenarios. Imports runtime.core only."""
