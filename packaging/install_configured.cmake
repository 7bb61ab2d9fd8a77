# Runs at install time (cmake --install, cpack): installs the files that name install paths —
# the example config as <confdir>/sqlstreams.toml with host.plugin_dir pointing at the
# installed plugin folder, and the systemd unit with ExecStart pointing at the installed binary.
# CMAKE_INSTALL_PREFIX is the install-time prefix here (--prefix, or /usr when cpack builds the
# .deb); DESTDIR is honoured by file(INSTALL). An existing sqlstreams.toml is never overwritten.
# Inputs: SQLSTREAMS_SOURCE_DIR, SQLSTREAMS_BINARY_DIR, SQLSTREAMS_CONFDIR, SQLSTREAMS_UNITDIR.
string(RANDOM LENGTH 12 run_id)  # concurrent installs (tests) must not share the files
set(stage "${SQLSTREAMS_BINARY_DIR}/install-configured/${run_id}")
file(MAKE_DIRECTORY "${stage}")
set(prefix "${CMAKE_INSTALL_PREFIX}")

file(READ "${SQLSTREAMS_SOURCE_DIR}/config/example.toml" toml)
string(REPLACE "plugin_dir = \"/usr/lib/sqlstreams/plugins\""
               "plugin_dir = \"${prefix}/lib/sqlstreams/plugins\"" toml "${toml}")
file(WRITE "${stage}/sqlstreams.toml" "${toml}")

file(READ "${SQLSTREAMS_SOURCE_DIR}/config/sqlstreams.service" unit)
string(REPLACE "ExecStart=/usr/bin/sqlstreams" "ExecStart=${prefix}/bin/sqlstreams" unit "${unit}")
string(REPLACE "/etc/sqlstreams/" "${SQLSTREAMS_CONFDIR}/" unit "${unit}")
file(WRITE "${stage}/sqlstreams.service" "${unit}")

if(EXISTS "$ENV{DESTDIR}${SQLSTREAMS_CONFDIR}/sqlstreams.toml")
  message(STATUS "Keeping: $ENV{DESTDIR}${SQLSTREAMS_CONFDIR}/sqlstreams.toml (the new example "
                 "is sqlstreams.toml.example)")
  file(INSTALL "${stage}/sqlstreams.toml" DESTINATION "${SQLSTREAMS_CONFDIR}"
       RENAME sqlstreams.toml.example PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
else()
  file(INSTALL "${stage}/sqlstreams.toml" DESTINATION "${SQLSTREAMS_CONFDIR}"
       PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
endif()
file(INSTALL "${stage}/sqlstreams.service" DESTINATION "${SQLSTREAMS_UNITDIR}"
     PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
file(REMOVE_RECURSE "${stage}")
