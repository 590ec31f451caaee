use super::*;

fn configs_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../configs")
}

/// Every shipped configuration parses, names a backend, and turns into engine
/// settings.
#[test]
fn shipped_configs_parse() {
    let mut seen = 0;
    for entry in std::fs::read_dir(configs_dir()).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let c = Config::load(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            assert!(c.backend.is_some(), "{}", path.display());
            let p = c.pipeline_config();
            assert!(p.gpu_workers_per_device >= 1, "{}", path.display());
            seen += 1;
        }
    }
    assert!(seen >= 5, "only {seen} configs");
    let c = Config::load(&configs_dir().join("dealloc-bounded.toml")).unwrap();
    let d = c.dealloc.unwrap();
    assert_eq!(d.plugin.as_deref(), Some("bounded"));
    assert_eq!(d.text_params("dealloc").unwrap()["depth"], "4");
    assert_eq!(c.engine.synth_jobs, Some(2));
}

/// An unknown table or key anywhere is an error that names it.
#[test]
fn unknown_tables_and_keys_are_named() {
    for (text, name) in [
        ("[engine]\nsynth_job = 2\n", "synth_job"),
        ("[deamon]\nport = 1\n", "deamon"),
        ("plugin_dri = \"x\"\n", "plugin_dri"),
        ("[backend]\nplugn = \"cpu\"\n", "plugn"),
        ("[queue]\nlease = 5\n", "lease"),
        (
            "[gpu_lock]\nplugin = \"single\"\nparam = { a = 1 }\n",
            "param",
        ),
    ] {
        let e = Config::from_toml(text, "cuzk.toml").unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.contains("cuzk.toml") && msg.contains(name),
            "{text:?}: {msg}"
        );
        assert!(matches!(e, ConfigError::Parse { .. }), "{msg}");
    }
}

#[test]
fn slots_name_one_plugin_or_builtin_with_scalar_params() {
    let e = Config::from_toml("[dealloc]\nplugin = \"a\"\nbuiltin = \"b\"\n", "t").unwrap_err();
    assert!(e.to_string().contains("not both"), "{e}");
    let e = Config::from_toml("[dealloc]\nparams = { depth = 1 }\n", "t").unwrap_err();
    assert!(e.to_string().contains("[dealloc]"), "{e}");
    let e =
        Config::from_toml("[backend]\nplugin = \"cpu\"\nparams = { a = [1] }\n", "t").unwrap_err();
    assert!(
        e.to_string()
            .contains("[backend]: parameter `a` is a array"),
        "{e}"
    );
    let e = Config::from_toml("[engine]\nsynth_jobs = \"two\"\n", "t").unwrap_err();
    assert!(e.to_string().contains("synth_jobs"), "{e}");
}

#[test]
fn engine_knobs_reach_the_pipeline_config() {
    let c = Config::from_toml(
        "[engine]\nsynth_jobs = 3\nsynth_threads = 4\ngpu_workers_per_device = 1\n\
         gpu_threads = 5\nmemory_budget_gib = 1.5\nverify = false\ncheck_witness = true\n\
         b_g2_on_backend = false\ncritical_reserve_gib = 0.5\ncritical_synth_slots = 2\n\
         abc_on_backend = true\ncritical_lane = false\n",
        "t",
    )
    .unwrap();
    let p = c.pipeline_config();
    assert_eq!(p.synth_jobs, Some(3));
    assert_eq!(p.synth_threads, 4);
    assert_eq!(p.gpu_workers_per_device, 1);
    assert_eq!(p.gpu_threads, 5);
    assert_eq!(p.memory_budget, Some(3 << 29));
    assert!(!p.verify && p.check_witness);
    assert_eq!(p.b_g2_on_backend, Some(false));
    assert_eq!(p.critical_reserve, Some(1 << 29));
    assert_eq!(p.critical_synth_slots, 2);
    assert_eq!(p.abc_on_backend, Some(true));
    assert_eq!(p.critical_lane, Some(false));
    // Left out: the defaults.
    let d = Config::from_toml("", "empty").unwrap();
    assert_eq!(d, Config::default());
    let (p, dp) = (d.pipeline_config(), PipelineConfig::default());
    assert_eq!(
        (
            p.synth_jobs,
            p.gpu_workers_per_device,
            p.verify,
            p.b_g2_on_backend,
            p.critical_reserve,
            p.critical_synth_slots
        ),
        (
            dp.synth_jobs,
            dp.gpu_workers_per_device,
            dp.verify,
            dp.b_g2_on_backend,
            dp.critical_reserve,
            dp.critical_synth_slots
        )
    );
}

/// Builtins build in-process with their parameters; unknown names and parameters
/// are errors that say what exists.
#[test]
fn builtins_build_and_reject_what_they_do_not_know() {
    let c = Config::from_toml(
        "[backend]\nbuiltin = \"cpu\"\nparams = { threads = 1 }\n\
         [dealloc]\nbuiltin = \"bounded\"\nparams = { depth = 2 }\n\
         [throttle]\nbuiltin = \"off\"\n[gpu_lock]\nbuiltin = \"split\"\n",
        "t",
    )
    .unwrap();
    let built = c.build_policies(&c.backend_needs(Some(10))).unwrap();
    assert_eq!(built.policies.backend.capabilities().name, "cpu");
    let names: Vec<_> = built.sources.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["cpu", "bounded", "off", "split"]);
    assert!(built
        .sources
        .iter()
        .all(|s| s.in_process && s.path.is_none()));
    // The bounded builtin frees what it is given.
    let freed = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    struct Flag(std::sync::Arc<std::sync::atomic::AtomicBool>);
    impl Drop for Flag {
        fn drop(&mut self) {
            self.0.store(true, std::sync::atomic::Ordering::SeqCst);
        }
    }
    built
        .policies
        .dealloc
        .release(cuzk_alloc::Released::new(Flag(freed.clone()), 1, "t"));
    built.policies.dealloc.drain();
    assert!(freed.load(std::sync::atomic::Ordering::SeqCst));

    // Empty slots: the defaults, marked as such.
    let built = Config::default()
        .build_policies(&BackendNeeds::default())
        .unwrap();
    assert_eq!(built.sources[0].name, "cpu (default)");
    assert_eq!(built.sources[1].name, "inline (default)");
    // The backend's parameters as used, defaults included, for manifests; its
    // fixed-base tables make B in G2 its job.
    let used: Vec<(&str, &str)> = built.sources[0]
        .params
        .iter()
        .map(|(k, v)| (k.as_str(), v.as_str()))
        .collect();
    assert_eq!(
        used,
        [("devices", "1"), ("tables_mib", "2048"), ("threads", "0")]
    );
    assert!(built.policies.backend.capabilities().g2_preferred);
    let off = Config::from_toml(
        "[backend]\nbuiltin = \"cpu\"\nparams = { tables_mib = 0 }\n",
        "t",
    )
    .unwrap()
    .build_policies(&BackendNeeds::default())
    .unwrap();
    assert!(!off.policies.backend.capabilities().g2_preferred);
    assert_eq!(off.sources[0].params["tables_mib"], "0");

    for (text, want) in [
        (
            "[dealloc]\nbuiltin = \"detatched\"\n",
            "builtins: inline, bounded",
        ),
        (
            "[dealloc]\nbuiltin = \"bounded\"\nparams = { deep = 2 }\n",
            "`deep`",
        ),
        (
            "[dealloc]\nbuiltin = \"bounded\"\nparams = { depth = -1 }\n",
            "`depth`",
        ),
        (
            "[backend]\nbuiltin = \"cuda\"\n",
            "no builtin backend named `cuda`",
        ),
        (
            "[gpu_lock]\nbuiltin = \"single\"\nparams = { x = 1 }\n",
            "`x`",
        ),
    ] {
        let c = Config::from_toml(text, "t").unwrap();
        let e = c.build_policies(&BackendNeeds::default()).unwrap_err();
        assert!(e.to_string().contains(want), "{text:?}: {e}");
    }
}

/// A plugin that is not there is the plugin host's error, naming it.
#[test]
fn a_missing_plugin_is_named() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cuzk.toml");
    std::fs::write(
        &path,
        "plugin_dir = \"plugins\"\n[throttle]\nplugin = \"nope\"\n",
    )
    .unwrap();
    let c = Config::load(&path).unwrap();
    assert_eq!(c.plugin_dir, Some(dir.path().join("plugins")));
    let e = c.build_policies(&BackendNeeds::default()).unwrap_err();
    assert!(
        matches!(e, ConfigError::Plugin(PluginError::NotFound { .. })),
        "{e}"
    );
    assert!(e.to_string().contains("nope"), "{e}");
}

/// The manifest's view: the whole configuration serialises and reads back equal.
#[test]
fn a_config_round_trips_through_serde() {
    let c = Config::load(&configs_dir().join("throttle-flag.toml")).unwrap();
    let json = serde_json::to_value(&c).unwrap();
    assert_eq!(json["throttle"]["plugin"], "flag");
    let text = toml::to_string(&c).unwrap();
    assert_eq!(Config::from_toml(&text, "again").unwrap(), c);
}

/// `[engine] devices` opens the backend once per listed device: the engine gets a
/// lane per ordinal, in the order given; a repeated ordinal is an error.
#[test]
fn devices_open_one_backend_per_device() {
    let c = Config::from_toml(
        "[engine]\ndevices = [1, 0]\n[backend]\nbuiltin = \"cpu\"\nparams = { threads = 1 }\n",
        "t",
    )
    .unwrap();
    assert_eq!(c.engine.devices, Some(vec![1, 0]));
    let built = c.build_policies(&BackendNeeds::default()).unwrap();
    let lanes: Vec<u32> = built
        .policies
        .backend
        .device_lanes()
        .iter()
        .map(|l| l.ordinal)
        .collect();
    assert_eq!(lanes, [1, 0]);
    // Unset: the backend as configured, one lane.
    let one = Config::from_toml("[backend]\nbuiltin = \"cpu\"\n", "t").unwrap();
    let built = one.build_policies(&BackendNeeds::default()).unwrap();
    assert!(built.policies.backend.device_lanes().is_empty());
    let dup = Config::from_toml("[engine]\ndevices = [2, 2]\n", "t").unwrap();
    let e = dup.build_policies(&BackendNeeds::default()).unwrap_err();
    assert!(e.to_string().contains("device 2 is listed twice"), "{e}");
    // A typed list: a name is a parse error.
    let e = Config::from_toml("[engine]\ndevices = [\"gpu0\"]\n", "t").unwrap_err();
    assert!(matches!(e, ConfigError::Parse { .. }), "{e}");
}

/// `[engine] devices` unset: a backend that reports several devices is opened
/// once per device (ordinals 0..n), so the engine drives them all; a list still
/// wins over the count.
#[test]
fn without_devices_every_device_the_backend_reports_gets_a_lane() {
    let lanes = |text: &str| -> Vec<u32> {
        let c = Config::from_toml(text, "t").unwrap();
        let built = c.build_policies(&BackendNeeds::default()).unwrap();
        built
            .policies
            .backend
            .device_lanes()
            .iter()
            .map(|l| l.ordinal)
            .collect()
    };
    let two = "[backend]\nbuiltin = \"cpu\"\nparams = { threads = 1, devices = 2 }\n";
    assert_eq!(lanes(two), [0, 1]);
    assert_eq!(lanes(&format!("[engine]\ndevices = [1]\n{two}")), [1]);
    let c = Config::from_toml(two, "t").unwrap();
    let built = c.build_policies(&BackendNeeds::default()).unwrap();
    assert_eq!(built.policies.backend.device_count(), 2);
}

#[test]
fn the_queue_section_parses_when_present_and_is_absent_otherwise() {
    let c =
        Config::from_toml("[queue]\nlease_secs = 5\njobs_in_flight = 1\n", "cuzk.toml").unwrap();
    let q = c.queue.unwrap();
    assert_eq!(q.lease_secs, Some(5.0));
    assert_eq!(q.jobs_in_flight, Some(1));
    assert_eq!(q.poll_ms, None);
    assert!(Config::from_toml("", "cuzk.toml").unwrap().queue.is_none());
}

/// `[plan]` is typed: its kinds are the planner's names, a key it does not know or
/// a value the planner cannot use is refused by name.
#[test]
fn the_plan_section_is_typed_and_checked() {
    let c = Config::from_toml(
        "[plan]\nkinds = [\"porep\", \"winning\"]\ndevice_memory_gib = 16\ndevices = 2\n",
        "t",
    )
    .unwrap();
    let p = c.plan.unwrap();
    assert_eq!(p.kinds, Some(vec![PlanKind::Porep, PlanKind::Winning]));
    assert_eq!((p.device_memory_gib, p.devices), (Some(16.0), Some(2)));
    for (text, named) in [
        ("[plan]\nkinds = [\"c2\"]\n", "c2"),
        ("[plan]\nkind = [\"porep\"]\n", "kind"),
        ("[plan]\nkinds = []\n", "kinds"),
        ("[plan]\nkinds = [\"snap\", \"snap\"]\n", "snap twice"),
        ("[plan]\ndevices = 1\n", "devices needs device_memory_gib"),
        (
            "[plan]\ndevice_memory_gib = 16\ndevices = 0\n",
            "devices = 0",
        ),
        ("[plan]\ndisk_read_gbps = -1\n", "disk_read_gbps"),
    ] {
        let err = Config::from_toml(text, "t").unwrap_err().to_string();
        assert!(err.contains(named), "{text}: {err}");
    }
}
