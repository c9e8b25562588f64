"""The benchmark (`make bench`): the driver and the floor app it measures the project against. Not shipped."""
