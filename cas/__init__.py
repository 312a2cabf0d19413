"""Content-addressed store: blobs, trees and snapshots in LMDB; scan, diff, restore."""
