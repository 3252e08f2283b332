"""Hudi's Flink writer roles: the write task, the coordinator and the compaction operators.
Imports runtime.protocols and below (never runtime.lab).
"""
