"""What native code and the C program agree on about a host: the buffers' lives in a run
(lives.py) and the arena placed by them (placement.py)."""
