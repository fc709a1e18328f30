"""miarepro: reproduce five membership-inference-attack papers on one shared pipeline."""

__version__ = "0.1.0"
