"""Writing: the write() front door, the tiled layout plan, encoded-tile sinks, untiled streams."""
