"""bench's OpenNN engine adapter: the ``--spec/--result`` entrypoint around the C++ driver.

The split: this package does what every bench engine shares (read the spec, verify the dataset
hash, compute the harness schedule with ``bench_engine.harness``, exit codes, signals, the
engine-result document); the C++ program (images/opennn/driver) builds and trains the model with
OpenNN, times the blocks it is given and reports what OpenNN really applied, line by line.
"""
