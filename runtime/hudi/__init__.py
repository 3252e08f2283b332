"""Hudi's table format and the Flink writer's checkpoint-message files, named as Hudi names them,
in Hudi's own layers, each importing only those below it (pyproject's import-linter contract):

* :mod:`runtime.hudi.client`: the write client and its table services (``hudi-client-common``);
* :mod:`runtime.hudi.table`: the table, its config, view, merging and files (``hudi-common``);
* :mod:`runtime.hudi.timeline`: instants, the active and archived timelines, table versions;
* :mod:`runtime.hudi.formats`: byte formats and documents, knowing no table (``hudi-io``).

Imports runtime.data and below."""
