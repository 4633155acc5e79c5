"""Writing: prepare each tick (validation, shard, id), ramp the rate, send in bulk batches."""
