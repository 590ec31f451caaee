//! GPU-lock policies: what a GPU worker holds around its device region.
//! (Defined by the plugin work; see ARCHITECTURE.md.)
