import sys
from pathlib import Path

# test helpers (tests/overfit.py) are imported as plain modules
sys.path.insert(0, str(Path(__file__).resolve().parent))
