// anvil/anvil.h — everything public.
//
//   #include <anvil/anvil.h>
//   int main() {
//     auto x = anvil::ones({2, 3}, anvil::try_gpu());
//     std::cout << (x + 2).exp() * x << "\n";
//   }
#pragma once

#include "anvil/amp.h"
#include "anvil/autocast.h"
#include "anvil/autograd.h"
#include "anvil/backends.h"
#include "anvil/data.h"
#include "anvil/device.h"
#include "anvil/device_log.h"
#include "anvil/dtype.h"
#include "anvil/error.h"
#include "anvil/grad_scaler.h"
#include "anvil/io.h"
#include "anvil/ledger.h"
#include "anvil/nn.h"
#include "anvil/nn/parallel.h"
#include "anvil/nn/sequence.h"
#include "anvil/ops.h"
#include "anvil/optim.h"
#include "anvil/profiler.h"
#include "anvil/runtime.h"
#include "anvil/shape.h"
#include "anvil/sync_guard.h"
#include "anvil/tensor.h"
#include "anvil/timer.h"
#include "anvil/version.h"
