// {{name}}.so — exports the plugin's manifest (one line, once per plugin).
#include "{{name}}.hpp"

SQLSTREAMS_PLUGIN("{{name}}", "0.1.0", {{name}}_plugin::Handler)
