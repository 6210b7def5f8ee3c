"""bench/vs_fsyncs.py's count of an strace output: each fsync once, by the kind of file it names."""
from bench.vs_fsyncs import count_fsyncs, kind_of

TRACE = """\
4101  fsync(45</d/t-0/leader-epoch-checkpoint.7.tmp> <unfinished ...>
4102  fsync(46</d/t-1/leader-epoch-checkpoint.tmp>) = 0
4101  <... fsync resumed>)                  = 0
4103  fsync(47</d/t-1/partition.metadata.tmp>) = 0
4104  fdatasync(48</d/t-0/00000000000000000000.log>) = 0
4105  fsync(49</d/t-0/00000000000000000000.index>) = 0
4106  fsync(50</d/replication-offset-checkpoint.tmp>) = 0
4107  fsync(51</d>)                          = 0
4108  fsync(52</d/t-0/producer.snapshot>)    = 0
4109  openat(AT_FDCWD</d>, "x", O_RDONLY)    = 53</d/x>
"""


def test_each_call_is_counted_once_by_its_file_kind():
    assert count_fsyncs(TRACE) == {"leader-epoch-checkpoint": 2, "partition.metadata": 1, "log segment": 1,
                                   "index": 1, "other checkpoint": 1, "directory": 1, "other": 1}


def test_kinds_of_files():
    assert kind_of("/var/kafka/vs-scale-12/leader-epoch-checkpoint") == "leader-epoch-checkpoint"
    assert kind_of("/run/broker-2") == "directory"
    assert kind_of("/var/kafka/t-3/00000000000000001234.timeindex") == "index"
    assert kind_of("/var/kafka/recovery-point-offset-checkpoint.tmp") == "other checkpoint"
    assert count_fsyncs("") == {}
