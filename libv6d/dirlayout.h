/*
 * dirlayout.h - the daemon's directory and pin page as libv6d's reader for
 * forked children (forkread.c) reads them. The one definition is Go's,
 * internal/shm/directory.go (its comment has the layout and both sides of
 * the protocol); this is a copy in C, checked against it when the package
 * compiles (forklayout.go: a constant that differs fails the build). Not
 * installed; not part of the ABI.
 */
#ifndef V6D_DIRLAYOUT_H_
#define V6D_DIRLAYOUT_H_

/* The directory's magic, "v6ddir\0" and the layout's version byte, read as
 * a little-endian word (shm.DirMagicWord). */
#define V6D_DIR_MAGIC_WORD 0x0200726964643676ULL
#define V6D_DIR_VERSION(word) ((unsigned)((word) >> 56))
#define V6D_DIR_HEADER_SIZE 64  /* shm.DirHeaderSize */
#define V6D_DIR_ENTRY_SIZE 32   /* shm.DirEntrySize: seq, id, offset, length */
#define V6D_DIR_MAX_PROBE 32    /* shm.DirMaxProbe */
#define V6D_DIR_RECORD_HEADER 32 /* shm.DirRecordHeader: id, n, tree length, shape */
#define V6D_DIR_BLOB_SIZE 24    /* shm.DirBlobSize: id, offset, size */
#define V6D_DIR_LIFE_WORD 4     /* shm's lifeWord: the daemon's robust futex */
#define V6D_DIR_MAX_RECORD 65536 /* client's maxDirRecord */
#define V6D_FUTEX_OWNER_DIED 0x40000000u
/* Pin page: word 0 the hint, slots 1.., and V6D_PIN_TAIL - 1 words at the
 * end, the last of which is the daemon's revoked flag. */
#define V6D_PIN_TAIL 5          /* shm's pinTail */
#define V6D_PIN_END_REVOKED 1   /* shm's endRevoked */
#define V6D_FORK_SLOT_FIRST 768 /* shm.ForkSlotFirst */
#define V6D_FORK_SLOT_LAST 1023 /* shm.ForkSlotLast */
#define V6D_FORK_PID_OFFSET 256 /* shm.ForkPidOffset: a slot's owner word */
#define V6D_FORK_WORDS_END 1280 /* shm.ForkWordsEnd */

#endif /* V6D_DIRLAYOUT_H_ */
