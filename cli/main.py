import sys

def main() -> None:
    print("earshot")
    sys.exit(0)
