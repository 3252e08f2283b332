"""Hudi's timeline (``hudi-common`` ``org.apache.hudi.common.table.timeline``): instants, the
active and archived timelines, the actions, the table versions and their layouts, and the
checkpoint-message files the Flink writer keeps beside it. Imports :mod:`runtime.hudi.formats`."""
