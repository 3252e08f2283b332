"""Fault injection (the injector the roles consult) and the named scenarios. Imports runtime.core only."""
