#pragma once
//! \file streamrt.hpp
//! Umbrella header: the whole public API of streamrt.

#include "streamrt/cpu.hpp"
#include "streamrt/device.hpp"
#include "streamrt/error.hpp"
#include "streamrt/event.hpp"
#include "streamrt/graph.hpp"
#include "streamrt/memory.hpp"
#include "streamrt/ops.hpp"
#include "streamrt/profiler.hpp"
#include "streamrt/stream.hpp"
#include "streamrt/stream_context.hpp"
#include "streamrt/tensor.hpp"
#include "streamrt/user_event.hpp"
#include "streamrt/version.hpp"
