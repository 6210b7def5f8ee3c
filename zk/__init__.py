"""The only door to ZooKeeper: the znode layout, codecs, the client (multi-reads, fenced writes), the rules
the simulator shares, topic administration (``admin``) and an embedded real server."""
