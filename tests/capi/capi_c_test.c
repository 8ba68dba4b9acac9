/* The C ABI from C: this file is compiled with -std=c11 -Wall -Wextra
 * -Werror -pedantic (tests/capi/CMakeLists.txt), so alkaid.h must be clean
 * C11. It starts a real broker (argv[1], the alkaid-broker program), builds
 * an ArrowSchema and ArrowArrays by hand as any C producer would, publishes
 * one batch by copy and one written in place through a loan, receives both
 * zero-copy, and hands bad input to the calls. Exit 0: passed. */

#define _POSIX_C_SOURCE 200809L

#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "alkaid/alkaid.h"

static int failures = 0;

#define CHECK(cond)                                                             \
  do {                                                                          \
    if (!(cond)) {                                                              \
      fprintf(stderr, "%s:%d: CHECK(%s) failed; last error: %s\n", __FILE__, \
              __LINE__, #cond, alkaid_last_error());                            \
      ++failures;                                                               \
    }                                                                           \
  } while (0)

/* Evaluates `cond` once; on failure reports it and ends the test. */
#define REQUIRE(cond)                                                             \
  do {                                                                            \
    if (!(cond)) {                                                                \
      fprintf(stderr, "%s:%d: REQUIRE(%s) failed; last error: %s\n", __FILE__, \
              __LINE__, #cond, alkaid_last_error());                              \
      Finish();                                                                   \
      return 1;                                                                   \
    }                                                                             \
  } while (0)

static pid_t broker_pid = -1;
static char socket_path[128];

static void Finish(void) {
  if (broker_pid > 0) {
    int status = 0;
    kill(broker_pid, SIGTERM);
    waitpid(broker_pid, &status, 0);
    broker_pid = -1;
  }
}

/* ---- a hand-made schema: struct<id: int64 not null, name: utf8> ---- */

static struct ArrowSchema field_id, field_name;
static struct ArrowSchema* field_ptrs[2];
static int schema_releases = 0;

static void ReleaseChild(struct ArrowSchema* s) { s->release = NULL; }

static void ReleaseSchema(struct ArrowSchema* s) {
  int64_t i;
  for (i = 0; i < s->n_children; ++i) {
    if (s->children[i]->release != NULL) s->children[i]->release(s->children[i]);
  }
  ++schema_releases;
  s->release = NULL;
}

static struct ArrowSchema MakeSchema(void) {
  struct ArrowSchema top;
  memset(&field_id, 0, sizeof field_id);
  memset(&field_name, 0, sizeof field_name);
  field_id.format = "l";
  field_id.name = "id";
  field_id.release = ReleaseChild;
  field_name.format = "u";
  field_name.name = "name";
  field_name.flags = ARROW_FLAG_NULLABLE;
  field_name.release = ReleaseChild;
  field_ptrs[0] = &field_id;
  field_ptrs[1] = &field_name;
  memset(&top, 0, sizeof top);
  top.format = "+s";
  top.name = "";
  top.n_children = 2;
  top.children = field_ptrs;
  top.release = ReleaseSchema;
  return top;
}

/* ---- a hand-made batch of 3 rows: id 1..3, name "a", NULL, "ccc" ---- */

static int64_t ids[3] = {1, 2, 3};
static int32_t offsets[4] = {0, 1, 1, 4};
/* Padded to 64 bytes, as the Arrow format recommends: readers (Alkaid's
 * UTF-8 check among them) may read whole words up to the padding. */
static const char chars[64] = "accc";
static uint8_t name_valid[1] = {0x5}; /* rows 0 and 2 */
static const void* id_buffers[2];
static const void* name_buffers[3];
static const void* top_buffers[1];
static struct ArrowArray col_id, col_name;
static struct ArrowArray* col_ptrs[2];
static int array_releases = 0;

static void ReleaseChildArray(struct ArrowArray* a) { a->release = NULL; }

static void ReleaseArray(struct ArrowArray* a) {
  int64_t i;
  for (i = 0; i < a->n_children; ++i) {
    if (a->children[i]->release != NULL) a->children[i]->release(a->children[i]);
  }
  ++array_releases;
  a->release = NULL;
}

static struct ArrowArray MakeArray(void) {
  struct ArrowArray top;
  memset(&col_id, 0, sizeof col_id);
  memset(&col_name, 0, sizeof col_name);
  id_buffers[0] = NULL;
  id_buffers[1] = ids;
  col_id.length = 3;
  col_id.n_buffers = 2;
  col_id.buffers = id_buffers;
  col_id.release = ReleaseChildArray;
  name_buffers[0] = name_valid;
  name_buffers[1] = offsets;
  name_buffers[2] = chars;
  col_name.length = 3;
  col_name.null_count = 1;
  col_name.n_buffers = 3;
  col_name.buffers = name_buffers;
  col_name.release = ReleaseChildArray;
  col_ptrs[0] = &col_id;
  col_ptrs[1] = &col_name;
  memset(&top, 0, sizeof top);
  top_buffers[0] = NULL;
  top.length = 3;
  top.n_buffers = 1;
  top.buffers = top_buffers;
  top.n_children = 2;
  top.children = col_ptrs;
  top.release = ReleaseArray;
  return top;
}

/* Checks a received batch of the hand-made values (ids offset by `base`). */
static void CheckReceived(struct ArrowArray* got, int64_t base) {
  const int64_t* got_ids;
  const int32_t* got_offsets;
  const char* got_chars;
  const uint8_t* got_valid;
  CHECK(got->length == 3 && got->n_children == 2);
  if (got->length != 3 || got->n_children != 2) return;
  got_ids = (const int64_t*)got->children[0]->buffers[1];
  CHECK(got_ids[0] == base + 1 && got_ids[2] == base + 3);
  got_valid = (const uint8_t*)got->children[1]->buffers[0];
  got_offsets = (const int32_t*)got->children[1]->buffers[1];
  got_chars = (const char*)got->children[1]->buffers[2];
  CHECK(got->children[1]->null_count == 1);
  CHECK(got_valid != NULL && (got_valid[0] & 0x7) == 0x5);
  CHECK(got_offsets[3] == 4 && memcmp(got_chars + got_offsets[2], "ccc", 3) == 0);
}

/* Options structs of every version (alkaid.h, "Options structs across
 * versions"): a program built against version 1, one built against a
 * newer header, and sizes of no version. Needs the broker (and topic "t").
 * Non-zero if a REQUIRE failed. */
static int CheckOptionVersions(alkaid_broker* broker) {
  union {
    alkaid_producer_options o;
    unsigned char bytes[112];
  } p;
  union {
    alkaid_consumer_options o;
    unsigned char bytes[96];
  } c;
  struct ArrowSchema schema;
  alkaid_producer* producer = NULL;
  alkaid_consumer* consumer = NULL;
  alkaid_topic_list* list = NULL;
  size_t i;
  int untouched;
  int stamps_v1 = -1, stamps_v3 = -1;

  /* This header's: the macro passes sizeof. */
  alkaid_producer_options_init(&p.o);
  CHECK(p.o.struct_size == sizeof(alkaid_producer_options));
  CHECK(p.o.publish_timestamps == 0 && p.o.publish_timeout_ms == 5000);

  /* A program built against version 1 calls the function (not the macro),
   * which writes the 72 bytes of version 1's struct and nothing past them;
   * that struct opens a producer (what lies past it is not read). */
  memset(p.bytes, 0xab, sizeof p.bytes);
  (alkaid_producer_options_init)(&p.o);
  CHECK(p.o.struct_size == ALKAID_PRODUCER_OPTIONS_SIZE_V1 && p.o.drain_timeout_ms == 5000);
  untouched = 1;
  for (i = ALKAID_PRODUCER_OPTIONS_SIZE_V1; i < sizeof p.bytes; ++i) {
    untouched &= p.bytes[i] == 0xab;
  }
  CHECK(untouched);
  p.o.socket_path = socket_path;
  p.o.wait_for_consumers_ms = 0;
  schema = MakeSchema();
  REQUIRE(alkaid_producer_open("v1", &schema, &p.o, &producer) == ALKAID_OK);
  CHECK(alkaid_producer_close(producer) == ALKAID_OK);

  /* A program built against a newer header, whose struct is 112 bytes: the
   * library writes its defaults and zeros past them, and takes the struct
   * while the bytes past its own fields stay zero. */
  memset(p.bytes, 0xab, sizeof p.bytes);
  alkaid_producer_options_init_sized(&p.o, sizeof p.bytes);
  CHECK(p.o.struct_size == sizeof p.bytes && p.o.publish_timeout_ms == 5000);
  untouched = 1;
  for (i = sizeof(alkaid_producer_options); i < sizeof p.bytes; ++i) untouched &= p.bytes[i] == 0;
  CHECK(untouched);
  p.o.socket_path = socket_path;
  p.o.wait_for_consumers_ms = 0;
  p.o.publish_timestamps = 1;
  schema = MakeSchema();
  REQUIRE(alkaid_producer_open("v3", &schema, &p.o, &producer) == ALKAID_OK);
  CHECK(alkaid_producer_close(producer) == ALKAID_OK);
  /* publish_timestamps reached the topic; version 1's struct left it off
   * (its bytes past the struct were 0xab, never read). */
  REQUIRE(alkaid_broker_list_topics(broker, &list) == ALKAID_OK);
  for (i = 0; i < alkaid_topic_list_size(list); ++i) {
    const alkaid_topic_info* t = alkaid_topic_list_get(list, i);
    if (strcmp(t->name, "v1") == 0) stamps_v1 = t->publish_timestamps;
    if (strcmp(t->name, "v3") == 0) stamps_v3 = t->publish_timestamps;
  }
  alkaid_topic_list_free(list);
  CHECK(stamps_v1 == 0 && stamps_v3 == 1);
  /* A newer field set: refused, naming the byte; the schema is taken. */
  p.bytes[104] = 1;
  schema = MakeSchema();
  CHECK(alkaid_producer_open("v3", &schema, &p.o, &producer) == ALKAID_INVALID);
  CHECK(strstr(alkaid_last_error(), "byte 104") != NULL);
  CHECK(schema.release == NULL);
  p.bytes[104] = 0;
  /* Sizes of no version: inside version 2's new field, none at all, and
   * one too large to be read (a struct never initialised). */
  p.o.struct_size = ALKAID_PRODUCER_OPTIONS_SIZE_V1 + 4;
  schema = MakeSchema();
  CHECK(alkaid_producer_open("v3", &schema, &p.o, &producer) == ALKAID_INVALID);
  CHECK(strstr(alkaid_last_error(), "struct_size") != NULL);
  p.o.struct_size = 0;
  schema = MakeSchema();
  CHECK(alkaid_producer_open("v3", &schema, &p.o, &producer) == ALKAID_INVALID);
  p.o.struct_size = 0x7fffffff;
  schema = MakeSchema();
  CHECK(alkaid_producer_open("v3", &schema, &p.o, &producer) == ALKAID_INVALID);
  /* init_sized writes no more than it is given: two bytes, not even a
   * struct_size. */
  memset(p.bytes, 0xab, sizeof p.bytes);
  alkaid_producer_options_init_sized(&p.o, 2);
  untouched = 1;
  for (i = 0; i < sizeof p.bytes; ++i) untouched &= p.bytes[i] == 0xab;
  CHECK(untouched);

  /* The consumer's options: version 1 is still this header's size. */
  alkaid_consumer_options_init(&c.o);
  CHECK(c.o.struct_size == ALKAID_CONSUMER_OPTIONS_SIZE_V1);
  CHECK(sizeof(alkaid_consumer_options) == ALKAID_CONSUMER_OPTIONS_SIZE_V1);
  memset(c.bytes, 0xab, sizeof c.bytes);
  (alkaid_consumer_options_init)(&c.o);
  untouched = 1;
  for (i = ALKAID_CONSUMER_OPTIONS_SIZE_V1; i < sizeof c.bytes; ++i) {
    untouched &= c.bytes[i] == 0xab;
  }
  CHECK(untouched && c.o.wait_mode == ALKAID_WAIT_SPIN_THEN_BLOCK);
  alkaid_consumer_options_init_sized(&c.o, sizeof c.bytes);
  c.o.socket_path = socket_path;
  REQUIRE(alkaid_consumer_open("t", &c.o, &consumer) == ALKAID_OK);
  CHECK(alkaid_consumer_close(consumer) == ALKAID_OK);
  c.bytes[70] = 1;
  CHECK(alkaid_consumer_open("t", &c.o, &consumer) == ALKAID_INVALID);
  CHECK(strstr(alkaid_last_error(), "byte 70") != NULL);
  return 0;
}

int main(int argc, char** argv) {
  alkaid_producer_options po;
  alkaid_consumer_options co;
  alkaid_producer* producer = NULL;
  alkaid_consumer* consumer = NULL;
  alkaid_loan* loan = NULL;
  alkaid_broker* broker = NULL;
  alkaid_topic_list* list = NULL;
  struct ArrowSchema schema;
  struct ArrowArray array;
  struct ArrowArray got;
  struct ArrowArray none;
  int64_t var_bytes[2] = {0, 4};
  void* data = NULL;
  int64_t size = 0;
  int tries;
  char name[64];

  if (argc != 2) {
    fprintf(stderr, "usage: %s <alkaid-broker>\n", argv[0]);
    return 2;
  }
  CHECK(alkaid_version() >= ALKAID_C_API_VERSION);
  CHECK(strcmp(alkaid_status_name(ALKAID_TIMED_OUT), "TimedOut") == 0);

  snprintf(name, sizeof name, "capic%ld", (long)getpid());
  snprintf(socket_path, sizeof socket_path, "/tmp/alkaid-test-%s.sock", name);
  broker_pid = fork();
  if (broker_pid == 0) {
    execl(argv[1], argv[1], "--socket", socket_path, "--name", name, "--log-level", "warn",
          (char*)NULL);
    _exit(127);
  }
  /* Wait (a bounded number of tries) for the broker to answer. */
  for (tries = 0; tries < 1000; ++tries) {
    struct timespec pause = {0, 5000000};
    if (alkaid_broker_connect(socket_path, &broker) == ALKAID_OK) break;
    nanosleep(&pause, NULL);
  }
  REQUIRE(broker != NULL);

  /* Bad input first: a status and a message, never a crash. */
  CHECK(alkaid_producer_open(NULL, NULL, NULL, &producer) == ALKAID_INVALID);
  CHECK(strlen(alkaid_last_error()) > 0);
  CHECK(alkaid_producer_publish(NULL, NULL, NULL) == ALKAID_INVALID);
  CHECK(alkaid_consumer_next(NULL, 0, &got, NULL, NULL) == ALKAID_INVALID);
  CHECK(alkaid_producer_loan(NULL, 1, NULL, 0, &loan) == ALKAID_INVALID);
  schema = MakeSchema();
  field_id.format = "not a format";
  CHECK(alkaid_producer_open("t", &schema, NULL, &producer) == ALKAID_INVALID);
  CHECK(schema.release == NULL && schema_releases == 1);
  CHECK(alkaid_producer_open("t", &schema, NULL, &producer) != ALKAID_OK); /* released */

  alkaid_producer_options_init(&po);
  po.socket_path = socket_path;
  po.slot_count = 16;
  po.arena_bytes = 1 << 20;
  alkaid_consumer_options_init(&co);
  co.socket_path = socket_path;
  co.wait_for_topic_ms = 10000;
  co.wait_mode = ALKAID_WAIT_BLOCK;
  co.verification = ALKAID_VERIFY_FULL;

  schema = MakeSchema();
  REQUIRE(alkaid_producer_open("t", &schema, &po, &producer) == ALKAID_OK);
  CHECK(schema.release == NULL);
  REQUIRE(alkaid_consumer_open("t", &co, &consumer) == ALKAID_OK);
  CHECK(alkaid_consumer_next(consumer, 0, &none, NULL, NULL) == ALKAID_TIMED_OUT);

  /* One batch by copy. */
  array = MakeArray();
  REQUIRE(alkaid_producer_publish(producer, &array, NULL) == ALKAID_OK);
  CHECK(array.release == NULL && array_releases == 1);
  /* A malformed one: offsets that go back. (Offsets past the value bytes
   * are a lie the C Data Interface cannot expose: it gives no buffer
   * sizes.) */
  offsets[1] = 3;
  array = MakeArray();
  CHECK(alkaid_producer_publish(producer, &array, NULL) == ALKAID_INVALID);
  CHECK(array.release == NULL && array_releases == 2);
  offsets[1] = 1;

  /* One batch written in place. */
  REQUIRE(alkaid_producer_loan(producer, 3, var_bytes, 2, &loan) == ALKAID_OK);
  REQUIRE(alkaid_loan_buffer(loan, 0, 1, &data, &size) == ALKAID_OK && size == 24);
  ((int64_t*)data)[0] = 11;
  ((int64_t*)data)[1] = 12;
  ((int64_t*)data)[2] = 13;
  REQUIRE(alkaid_loan_buffer(loan, 1, 0, &data, &size) == ALKAID_OK && size == 1);
  ((uint8_t*)data)[0] = 0x5;
  REQUIRE(alkaid_loan_buffer(loan, 1, 1, &data, &size) == ALKAID_OK && size == 16);
  memcpy(data, offsets, sizeof offsets);
  REQUIRE(alkaid_loan_buffer(loan, 1, 2, &data, &size) == ALKAID_OK && size == 4);
  memcpy(data, chars, 4);
  REQUIRE(alkaid_producer_publish_loan(producer, loan) == ALKAID_OK);

  REQUIRE(alkaid_consumer_next(consumer, 10000, &got, NULL, NULL) == ALKAID_OK);
  CheckReceived(&got, 0);
  got.release(&got);
  {
    /* Version 3's next: the info struct's size as this header declares it;
     * the topic does not stamp publish times, so publish_ns is 0. */
    alkaid_batch_info info;
    memset(&info, 0xab, sizeof info);
    REQUIRE(alkaid_consumer_next_sized(consumer, 10000, &got, NULL, &info, sizeof info) ==
            ALKAID_OK);
    CHECK(info.sequence == 1 && info.publish_ns == 0);
  }
  CheckReceived(&got, 10);
  CHECK(alkaid_producer_close(producer) == ALKAID_OK);
  /* The batch outlives its producer and consumer. */
  CHECK(alkaid_consumer_next(consumer, 10000, &none, NULL, NULL) == ALKAID_END_OF_STREAM);
  CHECK(alkaid_consumer_close(consumer) == ALKAID_OK);
  CheckReceived(&got, 10);
  got.release(&got);

  /* The topic list. */
  REQUIRE(alkaid_broker_list_topics(broker, &list) == ALKAID_OK);
  CHECK(alkaid_topic_list_size(list) == 1);
  if (alkaid_topic_list_size(list) == 1) {
    const alkaid_topic_info* t = alkaid_topic_list_get(list, 0);
    CHECK(strcmp(t->name, "t") == 0 && t->slot_count == 16 && t->arena_bytes == (1 << 20));
  }
  alkaid_topic_list_free(list);
  REQUIRE(CheckOptionVersions(broker) == 0);
  alkaid_broker_close(broker);

  Finish();
  if (failures > 0) {
    fprintf(stderr, "%d checks failed\n", failures);
    return 1;
  }
  printf("alkaid C API %d (%s): all checks passed\n", alkaid_version(), alkaid_version_string());
  return 0;
}
