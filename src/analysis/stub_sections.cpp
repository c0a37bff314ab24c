// Temporary: sections not yet implemented. Removed as each section lands.
#include "analysis/summary.hpp"
