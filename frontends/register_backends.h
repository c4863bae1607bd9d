// The front end is the one place that names the backends (core never does).
#pragma once

namespace gotap::cli {
void register_backends();
}
