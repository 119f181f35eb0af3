#ifndef HOOKBOT_WAL_WRITES_H
#define HOOKBOT_WAL_WRITES_H

/// Registers the "hookbot-wal" VFS, the default VFS wrapped so that a transaction's WAL frames reach the file in one
/// write instead of two per frame (see wal_writes.c). With `make_default` non-zero it becomes the default VFS of the
/// process. Safe to call more than once (later calls only change whether it is the default). Returns an SQLite result
/// code.
int hookbot_wal_writes_register(int make_default);

/// Write calls the wrapped VFS passed on to the real WAL files since the process started (for tests and benchmarks):
/// `coalesced` counts the writes that were collected into a larger one, `issued` the writes made to the files, `late`
/// the collected writes that were still waiting when the database file's barrier came (none, as SQLite writes a WAL).
void hookbot_wal_writes_counts(long long *coalesced, long long *issued, long long *late);

#endif
