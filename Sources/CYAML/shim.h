#ifndef C_YAML_SHIM_H
#define C_YAML_SHIM_H
#include <yaml.h>
#endif
