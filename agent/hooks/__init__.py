"""Adapters mapping other agents' hook events onto earshot's sessions, batches and logs."""
