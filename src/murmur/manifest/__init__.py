"""``murmur.yaml``: the capsule manifest model, its loader and its lowering."""
