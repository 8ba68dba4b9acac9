#ifndef ALKAID_ALKAID_H
#define ALKAID_ALKAID_H

/* The C ABI of Alkaid: publish and receive Arrow record batches through a
 * broker's topics, from any language that calls C (library `alkaid_c`,
 * exported as Alkaid::c). A C11 header; it is also valid C++.
 *
 * The contract, for every function below:
 *
 * - Errors. Every call that can fail returns an alkaid_status. ALKAID_OK (0)
 *   is success. Otherwise the calling thread's last-error message
 *   (alkaid_last_error) says what was wrong and where; it stays valid until
 *   the next call on this thread that fails. No C++ exception crosses this
 *   interface; a failed allocation is ALKAID_OUT_OF_MEMORY.
 * - Bad input. A NULL handle, a NULL out pointer, a released Arrow struct, a
 *   malformed ArrowSchema or ArrowArray, a schema that is not the topic's:
 *   each is an error status with a message, never a crash. (What the Arrow C
 *   Data Interface does not describe cannot be checked: a buffer shorter
 *   than its array's length implies.)
 * - Ownership of Arrow structs. An ArrowSchema or ArrowArray passed IN is
 *   taken, on success and on error alike: on return its `release` is NULL,
 *   and Alkaid calls the original release exactly once, when it no longer
 *   needs the memory. A struct that is already released is an error and is
 *   left alone. A struct filled OUT belongs to the caller, who calls its
 *   `release` once, on any thread; it is left untouched on error.
 * - Handles (alkaid_producer, alkaid_consumer, alkaid_loan,
 *   alkaid_broker, alkaid_topic_list) are opaque; each is freed by the one
 *   function named with it, exactly once. Unless a function says
 *   otherwise, a handle is used by one thread at a time.
 * - Lifetime of received data. A batch from alkaid_consumer_next points into
 *   the producer's shared memory and keeps its block held until its
 *   ArrowArray (and every child moved out of it) is released: on any
 *   thread, also after the consumer (and the producer) are gone.
 * - Options structs are initialised by their *_init macro (the defaults
 *   are documented per field) and then changed field by field. A NULL
 *   options pointer means the defaults.
 * - Options structs across versions. Each starts with `struct_size`, which
 *   the *_init macro sets to sizeof the struct as the caller's alkaid.h
 *   declares it (it calls the *_init_sized function with that size, and
 *   that function writes exactly that many bytes: the defaults of the
 *   fields it knows, zeros past them). Fields are only ever added at the
 *   end, and a field added later is defined so that zero means its
 *   default. The library then takes a struct of any version:
 *   - a smaller struct_size, from a program built against an older
 *     alkaid.h, is one of the sizes that header had (the
 *     ALKAID_*_OPTIONS_SIZE_V<n> below); the fields it lacks take their
 *     defaults;
 *   - a larger struct_size, from a program built against a newer alkaid.h,
 *     is accepted when every byte past the fields this library knows is
 *     zero (the newer fields left at their defaults) and refused with
 *     ALKAID_INVALID otherwise, naming the first byte that is not: the
 *     program asked for something this library does not do;
 *   - any other size is refused with ALKAID_INVALID.
 *   A program that needs a newer field to take effect checks
 *   alkaid_version() (see the field's "version N" note).
 *
 * Words: a topic has producers; each producer has a channel of `slot_count`
 * slots (one per message in flight) and an arena of shared memory
 * (`arena_bytes` to start with, growing up to `max_arena_bytes`) where the
 * batches' bodies live. docs/ARCHITECTURE.md has the rest. */

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ------------------------------------------------------------------------
 * The Arrow C Data and C Stream Interface, as their specification spells
 * them (the same guards: whichever header comes first defines them). */

#ifndef ARROW_C_DATA_INTERFACE
#define ARROW_C_DATA_INTERFACE

#define ARROW_FLAG_DICTIONARY_ORDERED 1
#define ARROW_FLAG_NULLABLE 2
#define ARROW_FLAG_MAP_KEYS_SORTED 4

struct ArrowSchema {
  const char* format;
  const char* name;
  const char* metadata;
  int64_t flags;
  int64_t n_children;
  struct ArrowSchema** children;
  struct ArrowSchema* dictionary;
  void (*release)(struct ArrowSchema*);
  void* private_data;
};

struct ArrowArray {
  int64_t length;
  int64_t null_count;
  int64_t offset;
  int64_t n_buffers;
  int64_t n_children;
  const void** buffers;
  struct ArrowArray** children;
  struct ArrowArray* dictionary;
  void (*release)(struct ArrowArray*);
  void* private_data;
};

#endif /* ARROW_C_DATA_INTERFACE */

#ifndef ARROW_C_STREAM_INTERFACE
#define ARROW_C_STREAM_INTERFACE

struct ArrowArrayStream {
  int (*get_schema)(struct ArrowArrayStream*, struct ArrowSchema* out);
  int (*get_next)(struct ArrowArrayStream*, struct ArrowArray* out);
  const char* (*get_last_error)(struct ArrowArrayStream*);
  void (*release)(struct ArrowArrayStream*);
  void* private_data;
};

#endif /* ARROW_C_STREAM_INTERFACE */

/* ------------------------------------------------------------------------
 * Versions, status codes, errors */

#if defined(_WIN32)
#define ALKAID_C_EXPORT
#else
#define ALKAID_C_EXPORT __attribute__((visibility("default")))
#endif

/* The version of this interface the header describes. It grows by one
 * whenever a function, a field or a status code is added; nothing is ever
 * removed or changed within one major version of the library. */
#define ALKAID_C_API_VERSION 4

/* The interface version the loaded library implements
 * (ALKAID_C_API_VERSION of the header it was built with): a program built
 * against version N runs with any library whose alkaid_version() >= N. */
ALKAID_C_EXPORT int32_t alkaid_version(void);
/* The library's release, e.g. "0.1.0". A static string. */
ALKAID_C_EXPORT const char* alkaid_version_string(void);

/* Status codes: the same numbers as Alkaid's C++ StatusCode. */
typedef enum alkaid_status {
  ALKAID_OK = 0,
  ALKAID_INVALID = 1,             /* malformed input or invalid argument */
  ALKAID_TYPE_ERROR = 2,          /* operation not defined for this type */
  ALKAID_INDEX_ERROR = 3,         /* index or range out of bounds */
  ALKAID_KEY_ERROR = 4,           /* no such topic or column */
  ALKAID_CAPACITY_ERROR = 5,      /* a size or count beyond a limit */
  ALKAID_OUT_OF_MEMORY = 6,       /* heap or shared memory exhausted */
  ALKAID_IO_ERROR = 7,            /* a system call failed; no broker answers */
  ALKAID_NOT_IMPLEMENTED = 8,     /* valid input this build cannot handle */
  ALKAID_SERIALIZATION_ERROR = 9, /* metadata could not be encoded or decoded */
  ALKAID_ALREADY_EXISTS = 10,     /* a named resource exists already */
  ALKAID_TIMED_OUT = 11,          /* a wait ended before its condition held */
  ALKAID_PERMISSION_DENIED = 12,  /* the caller may not do this */
  ALKAID_END_OF_STREAM = 13,      /* the topic has ended: not a failure */
  ALKAID_CANCELLED = 14,          /* stopped by a *_cancel call */
  ALKAID_UNKNOWN = 15,            /* anything else */
  /* Not a status: gives the enum the range of int32_t, so that any value a
   * caller passes (each function checks it) has defined behaviour. The
   * other enums below end the same way. */
  ALKAID_STATUS_ENUM_INT32 = 0x7fffffff
} alkaid_status;

/* "OK", "Invalid", "TimedOut", ...: a static string ("Unknown" for a value
 * that is not a status). */
ALKAID_C_EXPORT const char* alkaid_status_name(alkaid_status status);

/* The message of the last call that failed on this thread ("" if none
 * did). Valid until the next failing call on this thread. */
ALKAID_C_EXPORT const char* alkaid_last_error(void);

/* ------------------------------------------------------------------------
 * Settings shared by producers and consumers */

/* What a producer does when a consumer has not read the oldest slot. */
typedef enum alkaid_policy {
  ALKAID_POLICY_BLOCK_PRODUCER = 1, /* wait for it, up to publish_timeout_ms */
  ALKAID_POLICY_DROP_OLDEST = 2,    /* overwrite; the consumer sees a gap count */
  ALKAID_POLICY_ENUM_INT32 = 0x7fffffff
} alkaid_policy;

/* Whether a producer's arena is backed by transparent huge pages. */
typedef enum alkaid_huge_pages {
  ALKAID_HUGE_PAGES_OFF = 0,
  ALKAID_HUGE_PAGES_TRY = 1,     /* huge pages if the kernel gives them */
  ALKAID_HUGE_PAGES_REQUIRE = 2, /* or open fails naming the cause */
  ALKAID_HUGE_PAGES_ENUM_INT32 = 0x7fffffff
} alkaid_huge_pages;

/* How a consumer waits for the next batch. */
typedef enum alkaid_wait_mode {
  ALKAID_WAIT_BUSY_POLL = 0,       /* spin: lowest latency, one core busy */
  ALKAID_WAIT_BLOCK = 1,           /* sleep on a futex until the producer wakes it */
  ALKAID_WAIT_SPIN_THEN_BLOCK = 2, /* spin a little, then block (default) */
  ALKAID_WAIT_ENUM_INT32 = 0x7fffffff
} alkaid_wait_mode;

/* What a consumer checks of each batch before returning it
 * (docs/RELIABILITY.md, "Trust between processes"). */
typedef enum alkaid_verification {
  ALKAID_VERIFY_STRUCTURE = 0,    /* offsets, lengths and buffer places (default) */
  ALKAID_VERIFY_FULL = 1,         /* and every value offset and index */
  ALKAID_VERIFY_PRIVATE_COPY = 2, /* copy out of shared memory, then verify fully */
  ALKAID_VERIFY_ENUM_INT32 = 0x7fffffff
} alkaid_verification;

/* A duration in milliseconds meaning "no limit". */
#define ALKAID_FOREVER (-1)

/* ------------------------------------------------------------------------
 * Producer: publishes record batches to a topic */

typedef struct alkaid_producer alkaid_producer;

typedef struct alkaid_producer_options {
  uint32_t struct_size;
  /* The broker's socket; NULL: $ALKAID_BROKER_SOCKET, else
   * $XDG_RUNTIME_DIR/alkaid/broker.sock, else /tmp/alkaid-<uid>/broker.sock. */
  const char* socket_path;
  /* Used if this producer creates the topic (the first producer's settings
   * win). 0: the broker's default (slot_count 1024, arena_bytes 1 MiB,
   * max_arena_bytes 2 GiB or its shm limit). slot_count: a power of two. */
  alkaid_policy policy; /* default ALKAID_POLICY_BLOCK_PRODUCER */
  uint32_t slot_count;
  uint64_t arena_bytes;
  uint64_t max_arena_bytes;
  alkaid_huge_pages huge_pages; /* default OFF */
  /* Longest wait of a publish or loan for a free slot or arena space
   * (default 5000). */
  int64_t publish_timeout_ms;
  /* Open waits this long for the consumers already attached to the topic
   * to register, so that they see the first batch (default 10000; 0: no
   * wait). */
  int64_t wait_for_consumers_ms;
  /* alkaid_producer_close waits this long for the consumers to read every
   * batch (default 5000). */
  int64_t drain_timeout_ms;
  /* Version 2. Non-zero: if this producer creates the topic, the topic's
   * producers stamp each batch with the time they publish it
   * (CLOCK_REALTIME nanoseconds; a clock read per publish), which
   * consumers of the C++ client read as BatchOrigin::publish_ns and
   * `alkaid hz` shows (default 0: off; the first producer's setting wins,
   * as for slot_count). */
  int32_t publish_timestamps;
  /* Version 4. Fixed blocks in this producer's channel (the C++ client's
   * ProducerOptions::fixed_block_bytes; docs/SHM_LAYOUT.md, "Fixed
   * blocks"): bytes of each (rounded up to 64, at most 2^30; default 0:
   * none) and how many (at most 2^20; default 0: twice the topic's slots).
   * A loan of at most fixed_block_bytes (alkaid_producer_loan of a
   * fixed-width shape: its body, every column's values padded to 64) takes
   * a fixed block, which costs the publish and the consumers' release less
   * than an arena block; larger loans, or any while all are in use, take
   * the arena. The broker counts count x bytes against its shm limit
   * beside the arena (ALKAID_CAPACITY_ERROR from open beyond it); a broker
   * of an earlier release grants none. A count without bytes, or values
   * beyond the bounds: ALKAID_INVALID. */
  uint64_t fixed_block_bytes;
  uint32_t fixed_block_count;
} alkaid_producer_options;

/* sizeof(alkaid_producer_options) in version 1 (without
 * publish_timestamps), which the library still takes. */
#define ALKAID_PRODUCER_OPTIONS_SIZE_V1 72
/* ...and in versions 2 and 3 (without the fixed blocks). */
#define ALKAID_PRODUCER_OPTIONS_SIZE_V2 80

/* Writes the defaults into the first `struct_size` bytes of `options`
 * (zeros past the fields the library knows) and sets struct_size. Call it
 * through alkaid_producer_options_init. A struct_size smaller than
 * struct_size's own field writes nothing. */
ALKAID_C_EXPORT void alkaid_producer_options_init_sized(alkaid_producer_options* options,
                                                        size_t struct_size);
/* Version 1's function, kept for programs built against it: the defaults
 * of a version 1 struct (ALKAID_PRODUCER_OPTIONS_SIZE_V1 bytes). */
ALKAID_C_EXPORT void alkaid_producer_options_init(alkaid_producer_options* options);
/* The defaults for a struct of this header's version. */
#define alkaid_producer_options_init(options) \
  alkaid_producer_options_init_sized((options), sizeof(*(options)))

/* Connects to the broker, creates topic `topic` with `schema` (a struct
 * ArrowSchema, taken) or checks that the existing topic has that schema
 * (ALKAID_INVALID naming both otherwise), and creates this producer's
 * channel. ALKAID_IO_ERROR if no broker answers. */
ALKAID_C_EXPORT alkaid_status alkaid_producer_open(const char* topic, struct ArrowSchema* schema,
                                                   const alkaid_producer_options* options,
                                                   alkaid_producer** out);

/* Publishes one record batch: `array` is a struct array without nulls, one
 * child per column (taken); `schema` describes it (taken), or NULL for the
 * producer's schema. The import is validated in full (every offset, index
 * and UTF-8 string) and the schema must equal the topic's; the body is then
 * copied once into shared memory. */
ALKAID_C_EXPORT alkaid_status alkaid_producer_publish(alkaid_producer* producer,
                                                      struct ArrowArray* array,
                                                      struct ArrowSchema* schema);

/* The producer's schema (the topic's), exported into `*out`. */
ALKAID_C_EXPORT alkaid_status alkaid_producer_schema(alkaid_producer* producer,
                                                     struct ArrowSchema* out);

/* Counters of a producer. */
typedef struct alkaid_producer_stats {
  uint64_t published;         /* batches published */
  uint64_t copied_bytes;      /* body bytes copied into shared memory */
  uint64_t held_by_consumers; /* bodies the consumers have not returned yet */
  uint64_t arena_bytes_free;  /* as of the last publish */
} alkaid_producer_stats;

ALKAID_C_EXPORT alkaid_status alkaid_producer_stats_get(alkaid_producer* producer,
                                                        alkaid_producer_stats* out);

/* Cancels the producer's waits, from any thread (the one call on a producer
 * that may run beside another): the wait in progress (for room, for arena
 * space, close's drain) ends within a few milliseconds with
 * ALKAID_CANCELLED, and so does every later wait. Calls that need not wait
 * go through. */
ALKAID_C_EXPORT alkaid_status alkaid_producer_cancel(alkaid_producer* producer);

/* Ends the stream (consumers read what was published, then get
 * ALKAID_END_OF_STREAM), waiting up to drain_timeout_ms for them to read
 * it, and frees the producer (also when the status is not OK; NULL is a
 * no-op). Loans of this producer not yet published must be discarded
 * first. */
ALKAID_C_EXPORT alkaid_status alkaid_producer_close(alkaid_producer* producer);

/* ------------------------------------------------------------------------
 * Loans: a batch written in place in shared memory, published without a
 * copy */

typedef struct alkaid_loan alkaid_loan;

/* Lends space for a batch of `rows` rows in the producer's arena, with
 * every buffer laid out. Columns of fixed-width types (integers, floats,
 * booleans, decimals, dates, times, timestamps, durations, fixed-size
 * binary) and of variable-width binary and string types (binary, utf8,
 * large_binary, large_utf8) can be loaned; other types give
 * ALKAID_NOT_IMPLEMENTED (publish them with alkaid_producer_publish).
 * `var_data_bytes` has one entry per column of the topic's schema
 * (`n_columns` of them): the bytes of a variable-width column's values
 * buffer; ignored for other columns; NULL (with n_columns 0) when the
 * schema has no variable-width column. Waits up to publish_timeout_ms for
 * arena space.
 *
 * When every column is fixed-width and none is nullable, the loans go
 * through fixed-shape writers (the C++ client's FixedShapeWriter): a loan
 * of a row count that comes back (seen among the producer's last eight
 * loans) makes a writer of that shape, and once published the loan, writer
 * and all, serves the producer's next loan of the same rows (the same
 * handle may come back), whose publish then sends the region with the
 * Message sent once: no batch is built and nothing is allocated per loan.
 * A writer keeps the shape's Message, not a copy of its region; at most 8
 * are made per producer (each keeps a line of the channel's shape table)
 * and 4 idle ones kept. */
ALKAID_C_EXPORT alkaid_status alkaid_producer_loan(alkaid_producer* producer, int64_t rows,
                                                   const int64_t* var_data_bytes, size_t n_columns,
                                                   alkaid_loan** out);

/* Where buffer `buffer` of column `column` lies, in the Arrow C Data
 * Interface's order for the type: 0 the validity bitmap, 1 the values (or
 * for variable-width types the offsets: int32, int64 for the large ones),
 * 2 a variable-width type's value bytes. `*data` is 64-byte aligned and
 * writable until the loan is published or discarded; `*size` is its size
 * in bytes. The validity bitmap exists for nullable fields only (else
 * `*data` is NULL and `*size` 0) and starts all valid; the offsets of a
 * variable-width column start all 0. The values (of a fixed-width column,
 * and a variable-width column's value bytes) are not initialised: they
 * hold whatever the arena held (earlier batches of this producer's
 * channel), so write every value the batch's rows cover. A loan costs no
 * pass over them: the caller's writes are the only one. */
ALKAID_C_EXPORT alkaid_status alkaid_loan_buffer(alkaid_loan* loan, int32_t column, int32_t buffer,
                                                 void** data, int64_t* size);

/* The number of nulls of `column` (what its validity bitmap says). If it
 * is not set, publish counts the bitmap's zero bits. */
ALKAID_C_EXPORT alkaid_status alkaid_loan_set_null_count(alkaid_loan* loan, int32_t column,
                                                         int64_t null_count);

/* Publishes the loan as a batch without copying it. The batch is checked
 * first: a set null count against its bitmap, and the offsets of
 * variable-width columns (starting at 0, never decreasing, ending inside
 * the value bytes); the buffers' sizes are the loan's own. On success the
 * loan is no longer the caller's (the handle is invalid); the library frees
 * it at the producer's next loan or at close, off the publish, and its
 * arena space is in use until then, as while a consumer holds the batch (a
 * fixed-shape writer's loan is kept for a later loan instead, and its space
 * is the consumers' alone). On error it stays the caller's (fix it and
 * publish again, or discard it). */
ALKAID_C_EXPORT alkaid_status alkaid_producer_publish_loan(alkaid_producer* producer,
                                                           alkaid_loan* loan);

/* Gives an unpublished loan's space back to the arena and frees the loan
 * (NULL is a no-op). */
ALKAID_C_EXPORT void alkaid_loan_discard(alkaid_loan* loan);

/* ------------------------------------------------------------------------
 * Consumer: receives a topic's batches zero-copy */

typedef struct alkaid_consumer alkaid_consumer;

typedef struct alkaid_consumer_options {
  uint32_t struct_size;
  const char* socket_path; /* as alkaid_producer_options::socket_path */
  /* How long open waits for the topic to be created (default 0: fails at
   * once with ALKAID_KEY_ERROR; ALKAID_FOREVER: no limit). A consumer that
   * waited receives every batch from the topic's first. */
  int64_t wait_for_topic_ms;
  /* Non-zero: start at the oldest batch the producers' channels still hold
   * rather than the next one published (default 0). */
  int32_t from_oldest;
  /* Receive only these columns, by name, in this order (default: NULL, 0:
   * every column). The names are copied by open. */
  const char* const* columns;
  size_t n_columns;
  alkaid_wait_mode wait_mode;       /* default SPIN_THEN_BLOCK */
  alkaid_verification verification; /* default STRUCTURE */
  /* How many received batches the caller may hold (not yet released) at
   * once; beyond it next fails with ALKAID_CAPACITY_ERROR without taking a
   * batch (default 0: no limit). */
  uint64_t max_held_batches;
} alkaid_consumer_options;

/* sizeof(alkaid_consumer_options) in version 1 (still this version's). */
#define ALKAID_CONSUMER_OPTIONS_SIZE_V1 64

/* As alkaid_producer_options_init_sized, for a consumer's options. */
ALKAID_C_EXPORT void alkaid_consumer_options_init_sized(alkaid_consumer_options* options,
                                                        size_t struct_size);
/* Version 1's function, kept for programs built against it. */
ALKAID_C_EXPORT void alkaid_consumer_options_init(alkaid_consumer_options* options);
/* The defaults for a struct of this header's version. */
#define alkaid_consumer_options_init(options) \
  alkaid_consumer_options_init_sized((options), sizeof(*(options)))

/* Connects to the broker and subscribes to `topic` (see wait_for_topic_ms).
 * ALKAID_KEY_ERROR for an unknown topic or column. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_open(const char* topic,
                                                   const alkaid_consumer_options* options,
                                                   alkaid_consumer** out);

/* Where a batch came from. An out struct the caller owns: fields are only
 * added at the end, and a call writes only the bytes the caller says its
 * struct has (alkaid_consumer_next_sized), so a program built against an
 * older alkaid.h is never written past its struct. */
typedef struct alkaid_batch_info {
  uint64_t producer_id; /* as the broker numbers the topic's producers */
  uint32_t producer_pid;
  uint64_t sequence;    /* the batch's place in that producer's channel */
  uint64_t lost_before; /* batches of that producer lost just before it */
  /* Version 3. When the producer published the batch: CLOCK_REALTIME
   * nanoseconds, taken just before it wrote the batch's slot; 0 unless the
   * topic stamps publish times (alkaid_producer_options::
   * publish_timestamps). A receive time (CLOCK_REALTIME) minus it is the
   * publish-to-receive latency, give or take a clock step. */
  uint64_t publish_ns;
} alkaid_batch_info;

/* sizeof(alkaid_batch_info) in versions 1 and 2 (without publish_ns). */
#define ALKAID_BATCH_INFO_SIZE_V1 32

/* The next batch, waiting up to `timeout_ms` (0: only what is there;
 * ALKAID_FOREVER: no limit): a struct array in `*out` whose buffers point
 * into the producer's shared memory (release it to let the block go), its
 * schema in `*out_schema` if that is not NULL, where it came from in
 * `*info` if that is not NULL. ALKAID_TIMED_OUT if none came;
 * ALKAID_END_OF_STREAM once every producer the consumer saw has closed or
 * died and everything was read; ALKAID_CANCELLED after
 * alkaid_consumer_cancel. A batch costs no copy and, for a shape seen
 * before, no allocation but the export's. With timeout 0 after
 * alkaid_consumer_wait_fd, an ALKAID_TIMED_OUT leaves the descriptor
 * armed. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_next(alkaid_consumer* consumer, int64_t timeout_ms,
                                                   struct ArrowArray* out,
                                                   struct ArrowSchema* out_schema,
                                                   alkaid_batch_info* info);

/* Version 3: alkaid_consumer_next writes version 1's fields of `*info`
 * (its first ALKAID_BATCH_INFO_SIZE_V1 bytes) and nothing past them; this
 * one writes `info_size` bytes, sizeof(*info) as the caller's alkaid.h
 * declares it: the fields this library knows, zeros past them. The size
 * is one of a version's (ALKAID_BATCH_INFO_SIZE_V1, or this header's
 * sizeof), or larger up to 1024 (a newer alkaid.h's struct: its fields
 * this library does not know are written 0); any other size is refused
 * with ALKAID_INVALID before a batch is taken. Ignored when `info` is NULL.
 * Otherwise as alkaid_consumer_next. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_next_sized(alkaid_consumer* consumer,
                                                         int64_t timeout_ms, struct ArrowArray* out,
                                                         struct ArrowSchema* out_schema,
                                                         alkaid_batch_info* info, size_t info_size);

/* The schema of the batches next returns (the topic's, narrowed to the
 * column subset), exported into `*out`. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_schema(alkaid_consumer* consumer,
                                                     struct ArrowSchema* out);

/* The consumer as an ArrowArrayStream: each get_next waits up to
 * `batch_timeout_ms` (ALKAID_FOREVER: no limit) for the next batch
 * (ETIMEDOUT after it), ends at the end of the stream, gives ECANCELED
 * after alkaid_consumer_cancel (a waiting get_next within a few
 * milliseconds), and gives errors as errno codes with the message from
 * get_last_error. The stream borrows the
 * consumer: release it before closing the consumer, and do not call next
 * meanwhile. Batches it gave out may outlive both. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_stream(alkaid_consumer* consumer,
                                                     int64_t batch_timeout_ms,
                                                     struct ArrowArrayStream* out);

/* Counters of a consumer. */
typedef struct alkaid_consumer_stats {
  uint64_t lost;       /* batches lost to overwrites (drop-oldest topics) */
  uint64_t held;       /* batches handed out and not yet released */
  uint64_t handed_out; /* batches handed out so far */
  uint64_t refused;    /* nexts refused by max_held_batches */
  uint64_t producers;  /* producers the consumer reads from now */
} alkaid_consumer_stats;

ALKAID_C_EXPORT alkaid_status alkaid_consumer_stats_get(alkaid_consumer* consumer,
                                                        alkaid_consumer_stats* out);

/* A descriptor for poll, select or epoll (level-triggered) that turns
 * readable when the consumer may have news for next: a batch, a new or
 * finished producer. For waiting on many topics from one thread: call next
 * with timeout 0 until it gives ALKAID_TIMED_OUT (which arms the
 * descriptor), then sleep on the descriptors of every consumer; on
 * readable, next with timeout 0 again. A next that waits (timeout > 0)
 * disarms it. Producers wake it directly (a byte into a pipe of this
 * consumer, as they would wake a futex), which needs them to run as the
 * same user; a producer that dies wakes it only through the broker, a
 * little later, so sleep with a timeout (100 ms, say). Owned by the
 * consumer: do not close it. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_wait_fd(alkaid_consumer* consumer, int* fd);

/* Cancels the consumer, from any thread (the one call on a consumer that
 * may run beside another): a next waiting now returns ALKAID_CANCELLED
 * within a few milliseconds, and so does every later next; so does its
 * stream's get_next, with ECANCELED. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_cancel(alkaid_consumer* consumer);

/* Detaches from the broker and frees the consumer (NULL is a no-op).
 * Batches it handed out stay valid until released. Not while another
 * thread is in next. */
ALKAID_C_EXPORT alkaid_status alkaid_consumer_close(alkaid_consumer* consumer);

/* ------------------------------------------------------------------------
 * Broker management: what `alkaid topics` shows */

typedef struct alkaid_broker alkaid_broker;
typedef struct alkaid_topic_list alkaid_topic_list;

/* A topic and its counters. */
typedef struct alkaid_topic_info {
  const char* name; /* valid as long as the list */
  uint32_t slot_count;
  uint64_t arena_bytes;     /* each producer's initial arena */
  uint64_t max_arena_bytes; /* what each producer's arena may grow to */
  alkaid_policy policy;
  int32_t row_topic; /* non-zero: an UnsafeRow topic (C++ only) */
  uint32_t producers;
  uint32_t consumers;
  uint64_t published; /* messages published, as the producers last reported */
  uint64_t depth;     /* messages the slowest consumer has yet to read */
  uint64_t drops;     /* messages lost by slow consumers */
  uint64_t held;      /* bodies the consumers hold */
  uint64_t shm_bytes; /* shared memory the topic's producers hold */
  /* Version 2: non-zero if the topic's producers stamp publish times
   * (alkaid_producer_options::publish_timestamps). The library owns these
   * structs, so fields are added at the end without a struct_size. */
  int32_t publish_timestamps;
} alkaid_topic_info;

/* Connects to the broker at `socket_path` (NULL: the default, as for a
 * producer). ALKAID_IO_ERROR naming the socket if none answers. */
ALKAID_C_EXPORT alkaid_status alkaid_broker_connect(const char* socket_path, alkaid_broker** out);

/* Every topic the broker knows, with its counters. */
ALKAID_C_EXPORT alkaid_status alkaid_broker_list_topics(alkaid_broker* broker,
                                                        alkaid_topic_list** out);

/* Frees the connection (NULL is a no-op). */
ALKAID_C_EXPORT void alkaid_broker_close(alkaid_broker* broker);

/* The number of topics in `list` (0 for NULL). */
ALKAID_C_EXPORT size_t alkaid_topic_list_size(const alkaid_topic_list* list);
/* Topic `index` of `list`; NULL if out of range. Valid as long as the list. */
ALKAID_C_EXPORT const alkaid_topic_info* alkaid_topic_list_get(const alkaid_topic_list* list,
                                                               size_t index);
/* The schema of topic `index`, exported into `*out`; ALKAID_KEY_ERROR if
 * the broker left it out of the list (it lists schemas up to 1 MiB in
 * all). */
ALKAID_C_EXPORT alkaid_status alkaid_topic_list_schema(const alkaid_topic_list* list, size_t index,
                                                       struct ArrowSchema* out);
/* Frees the list (NULL is a no-op). */
ALKAID_C_EXPORT void alkaid_topic_list_free(alkaid_topic_list* list);

#ifdef __cplusplus
}
#endif

#endif /* ALKAID_ALKAID_H */
