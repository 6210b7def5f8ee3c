"""What every process of kafkasim uses, below everything else (it imports nothing from the project):

- ``waiting``: ``wait_for(cond, timeout, what)``, the only way anything waits for another process;
- ``procs``: a process's state and start time from ``/proc/<pid>/stat``;
- ``jsonlines``: the one JSON-lines writer and reader (the brokers' event logs, a chaos run's history).
"""
