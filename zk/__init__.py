"""ZooKeeper helpers: znode layout, codecs, multi-reads and an embedded real server."""
