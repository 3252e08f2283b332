"""The data plane: the generator, the workload read and prepared by Spark, and the record-column
contract. Imports runtime.core (and faults' specs) only.
"""
