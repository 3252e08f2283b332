"""The ports every role uses: env, codec, wire messages, config, DFS, storage, trace, metrics, fault
specs. Imports nothing of the project.
"""
