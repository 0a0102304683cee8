"""Where tiling, codecs and storage meet: tile decoding, the lazy Volume, untiled data."""
