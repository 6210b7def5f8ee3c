"""The group coordinator, as a sans-IO state machine per __consumer_offsets partition (issue 4; not built yet)."""
