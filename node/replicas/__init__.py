"""Replica management: the partitions a broker hosts, Produce and Fetch, fetcher threads, the purgatory."""
