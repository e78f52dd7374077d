"""Bounded shared resources, generic over the Django model that holds them.

``slots``: at most N holders at once, deployment-wide, as numbered rows with leases (the
worker slots of batch jobs, the fetch gate). ``eviction``: oldest first until a byte budget is
met (finished jobs, cached documents). ``caller_budget``: one byte budget per caller over rows of
several tables (last readings, monitor changes). Neither side imports the other; both import this.
"""
