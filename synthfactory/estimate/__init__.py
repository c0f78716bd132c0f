"""``synthfactory estimate``: what a synthetic-token target takes, before any GPU is
rented: GPU-hours, wall-clock, dollars, shards, shard groups, daily runs, crawl list
requests and stitch core-hours, from a throughput given or measured (docs/scale.md)."""
