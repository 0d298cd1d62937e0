// SPDX-License-Identifier: MIT
#include "util/log.h"

int ct_verbose;
