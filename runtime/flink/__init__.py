"""The Flink model: mailbox, job manager (checkpointing), source, state backend, failover. Imports
runtime.hudi and below.
"""
