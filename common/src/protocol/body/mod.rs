//! JSON bodies of remoting commands (`common/.../protocol/body/**` in RocketMQ).
