"""Hudi's Flink writer roles: the write task, the coordinator, and the one job topology both hosts
build. Imports runtime.lab and below.
"""
