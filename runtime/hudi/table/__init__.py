"""A Hudi table as ``hudi-common`` reads and writes it: its config, meta client, file-system view,
record merging, write handles' files, markers and log files. Imports :mod:`runtime.hudi.timeline`
and below; it never runs a table service (:mod:`runtime.hudi.client` does)."""
