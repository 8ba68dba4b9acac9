// A consumer of an unsafe-row topic: receives each row batch as a view of
// the producer's shared memory, prints its size, and decodes the columns it
// wants (here "sensor" and "value") into a record batch.
//
//   alkaid-broker &                          # terminal 1
//   ./row_consumer rows                      # terminal 2 (waits for the topic)
//   alkaid publish rows data.arrow --unsafe-row   # terminal 3, or any row producer

#include <chrono>
#include <iostream>
#include <string>

#include "alkaid/client/row_consumer.h"

int main(int argc, char** argv) {
  const std::string topic = argc > 1 ? argv[1] : "rows";
  using namespace std::chrono_literals;

  // A RowConsumer expects a row topic: the broker refuses it on a
  // record-batch topic (Invalid, naming both kinds).
  alkaid::client::ConsumerOptions options;
  // Decode only these columns (an unknown name fails Open with KeyError).
  options.columns = {"sensor", "value"};

  // Waits (up to 30 s) for a producer to create the topic; from then on
  // every row batch arrives, from the first one.
  options.wait_for_topic = 30s;
  auto consumer = alkaid::client::RowConsumer::Open(topic, options);
  if (!consumer.ok()) {
    std::cerr << "row_consumer: " << consumer.status().ToString() << "\n";
    return 1;
  }
  while (true) {
    auto rows = (*consumer)->NextRows(10s);
    if (!rows.ok()) {
      // EndOfStream once every producer finished; TimedOut after 10 s idle.
      std::cout << rows.status().ToString() << "\n";
      return rows.status().code() == alkaid::StatusCode::kEndOfStream ? 0 : 1;
    }
    // rows->data points into shared memory: no byte was copied so far. The
    // block stays referenced until `rows` (and anything sliced from it) goes.
    std::cout << "message " << rows->sequence << ": " << rows->num_rows << " rows, "
              << rows->data->size() << " bytes";
    auto batch = rows->ToRecordBatch();  // checks every row, decodes into private memory
    if (!batch.ok()) {
      std::cout << ", bad rows: " << batch.status().ToString() << "\n";
      continue;
    }
    std::cout << ", " << (*batch)->num_columns() << " columns decoded\n";
  }
}
