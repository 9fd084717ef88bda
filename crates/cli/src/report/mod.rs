//! What the analysis commands show people: ports as given on the command line, focusing a
//! matrix, and its renderings (table, Graphviz, HTML).

pub mod ports;
