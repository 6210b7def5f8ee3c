"""Operator tools: the kafkasim CLI, the cluster launcher, topic administration, the demos."""
